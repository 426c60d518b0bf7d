// Package web holds the pages fans and operators see, embedded in the
// gateway binary: the waiting room, the booking page and the operator
// console. Plain HTML, CSS and JavaScript with no build step and no
// external resource, so nothing leaks fans to third parties and the pages
// work on a closed network.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// Static is the pages' file tree (waiting.html, book.html, admin.html, ...).
var Static, _ = fs.Sub(files, "static")
