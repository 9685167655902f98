// Package doccheck holds repository-wide checks of the documentation that
// users read: its test fails when the go doc of a public package cites the
// design documents the project was built from.
package doccheck
