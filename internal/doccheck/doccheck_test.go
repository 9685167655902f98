package doccheck

import (
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// designRef matches the ways the code cites its design documents: the
// seeds' sections ("seed §5", "seed state-flow §3"), acceptance criteria
// ("AC-3.5.6"), the protocol reference's numbered sections ("reference
// 1.21", "protocol §1.18") and DESIGN.md's decisions. Users of the SDK
// cannot read those documents, so their go doc must say things in its own
// words; tests and unexported code may keep the citations.
var designRef = regexp.MustCompile(`§|\bAC-[0-9X]|\bseeds?\b|[Rr]eference \d|\bDESIGN\b|\breference's\b`)

// TestPublicDocsCiteNoDesignDocuments reads the go doc of every public
// package of the module (not internal, not a command, not an example) as
// `go doc -all` shows it: the package comment and the comments of exported
// identifiers, struct fields and interface methods.
func TestPublicDocsCiteNoDesignDocuments(t *testing.T) {
	root := moduleRoot(t)
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" || name == "examples" || name == "cmd"):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("found only %d public packages under %s", len(dirs), root)
	}
	for dir := range dirs {
		fset := token.NewFileSet()
		for _, c := range publicComments(t, fset, dir) {
			if designRef.MatchString(c.Text) {
				pos := fset.Position(c.Pos())
				rel, _ := filepath.Rel(root, pos.Filename)
				t.Errorf("%s:%d: go doc cites a design document: %s", rel, pos.Line, c.Text)
			}
		}
	}
}

// publicComments returns the comment lines go doc shows for the package in
// dir: the package comment and the comments of exported declarations,
// struct fields and interface methods.
func publicComments(t *testing.T, fset *token.FileSet, dir string) []*ast.Comment {
	// The files the go tool builds here (build tags and file names
	// considered), without the tests.
	bp, err := build.ImportDir(dir, 0)
	if _, none := err.(*build.NoGoError); none {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if bp.Name == "main" {
		return nil
	}
	var out []*ast.Comment
	collect := func(n ast.Node) {
		if n == nil || reflect.ValueOf(n).IsNil() {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if cg, ok := n.(*ast.CommentGroup); ok {
				out = append(out, cg.List...)
			}
			return true
		})
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		collect(f.Doc)
	}
	// Without AllDecls only exported identifiers are kept, as go doc shows
	// them; PreserveAST keeps the comments in the tree.
	p, err := doc.NewFromFiles(fset, files, bp.ImportPath, doc.PreserveAST)
	if err != nil {
		t.Fatal(err)
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			collect(v.Decl)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			collect(f.Decl.Doc) // not the body
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs(p.Funcs)
	for _, ty := range p.Types {
		collect(ty.Decl)
		values(ty.Consts)
		values(ty.Vars)
		funcs(ty.Funcs)
		funcs(ty.Methods)
	}
	return out
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
