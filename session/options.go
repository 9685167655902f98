package session

import "github.com/rs/zerolog"

// Option tunes the readers, the Lister and the Watcher.
type Option func(*config)

type config struct {
	maxLine int
	log     zerolog.Logger
}

func newConfig(opts []Option) config {
	c := config{maxLine: DefaultMaxLineBytes, log: zerolog.Nop()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithMaxLineBytes sets the longest line a reader accepts (default
// DefaultMaxLineBytes). A longer line is an ErrLineTooLong.
func WithMaxLineBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxLine = n
		}
	}
}

// WithLogger sets the logger (default zerolog.Nop()). The Lister logs the
// files it skips; the Watcher logs listing failures it retries.
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) { c.log = l }
}
