package session

import (
	"fmt"
	"strings"
	"unicode"
)

// Name prefixes. The kind of a session follows from its name.
const (
	BaselinePrefix = "baseline:"
	TaskPrefix     = "task:"
)

// MaxSlugLen bounds the slug of a task name, so names stay readable in
// listings and safe as file or branch name parts.
const MaxSlugLen = 48

// untitledSlug stands in for a title without a single letter or digit.
const untitledSlug = "untitled"

// KindOf classifies a session name: "baseline:…" is a baseline, "task:…" a
// task, anything else (including no name) scratch.
func KindOf(name string) Kind {
	switch {
	case strings.HasPrefix(name, BaselinePrefix):
		return KindBaseline
	case strings.HasPrefix(name, TaskPrefix):
		return KindTask
	default:
		return KindScratch
	}
}

// BaselineName returns "baseline:<repo>", the name of a repository's primed
// baseline session. repo is trimmed; it must be non-empty and free of
// control characters.
func BaselineName(repo string) (string, error) {
	repo = strings.TrimSpace(repo)
	if repo == "" {
		return "", fmt.Errorf("%w: empty repository name", ErrInvalidName)
	}
	if strings.ContainsFunc(repo, unicode.IsControl) {
		return "", fmt.Errorf("%w: repository name %q has control characters", ErrInvalidName, repo)
	}
	return BaselinePrefix + repo, nil
}

// TaskName returns "task:<taskID>:<slug>", with the slug made from title by
// Slugify ("untitled" when title has no letter or digit). taskID must be
// non-empty and hold no ':' or whitespace, so the name parses back.
func TaskName(taskID, title string) (string, error) {
	if err := checkTaskID(taskID); err != nil {
		return "", err
	}
	slug := Slugify(title)
	if slug == "" {
		slug = untitledSlug
	}
	return TaskPrefix + taskID + ":" + slug, nil
}

func checkTaskID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty task id", ErrInvalidName)
	case strings.ContainsFunc(id, func(r rune) bool { return r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("%w: task id %q holds ':', space or a control character", ErrInvalidName, id)
	}
	return nil
}

// Slugify turns a prompt or title into a short, deterministic slug: ASCII
// letters (lowercased) and digits, every other run of characters one '-',
// no leading or trailing '-', at most MaxSlugLen bytes (cut at a word
// boundary when one is near enough). Non-ASCII letters count as separators:
// the slug is meant for names, branches and files, not for reading back.
func Slugify(title string) string {
	var b strings.Builder
	sep := false
	for _, r := range title {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		default:
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteRune(r)
		if b.Len() > MaxSlugLen {
			break
		}
	}
	s := b.String()
	if len(s) <= MaxSlugLen {
		return s
	}
	s = s[:MaxSlugLen]
	if i := strings.LastIndexByte(s, '-'); i >= MaxSlugLen/2 {
		s = s[:i]
	}
	return strings.TrimRight(s, "-")
}

// ParsedName is a session name taken apart.
type ParsedName struct {
	Kind   Kind
	Repo   string // baseline names
	TaskID string // task names
	Slug   string // task names
}

// ParseName takes a baseline or task name apart. Any other name is a
// scratch name and parses to Kind scratch. A name with a baseline or task
// prefix that does not follow its form is an ErrInvalidName.
func ParseName(name string) (ParsedName, error) {
	switch KindOf(name) {
	case KindBaseline:
		repo := strings.TrimPrefix(name, BaselinePrefix)
		if strings.TrimSpace(repo) == "" {
			return ParsedName{}, fmt.Errorf("%w: %q names no repository", ErrInvalidName, name)
		}
		return ParsedName{Kind: KindBaseline, Repo: repo}, nil
	case KindTask:
		id, slug, _ := strings.Cut(strings.TrimPrefix(name, TaskPrefix), ":")
		if err := checkTaskID(id); err != nil {
			return ParsedName{}, fmt.Errorf("%q: %w", name, err)
		}
		return ParsedName{Kind: KindTask, TaskID: id, Slug: slug}, nil
	default:
		return ParsedName{Kind: KindScratch}, nil
	}
}
