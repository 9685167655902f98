package dialer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestConfig_DefaultsAreTheSeeds(t *testing.T) {
	c := DefaultConfig()
	if c.MinRetryInterval != time.Second || c.MaxRetryInterval != 5*time.Minute || c.RetryBackoffFactor != 1.5 ||
		c.FastFailureWindow != 5*time.Second || c.DialDelay != 30*time.Second {
		t.Errorf("seed defaults differ: %+v", c)
	}
	if c.ScanInterval != time.Hour || c.ScanSpread != 50*time.Millisecond || c.PoolSize != 10 || c.QueueSize != 32 {
		t.Errorf("upstream defaults differ: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// The checklist's "empty groups" case has no counterpart: groups are the
// Directory's business.
func TestConfig_ValidationNamesTheField(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"MinRetryInterval", func(c *Config) { c.MinRetryInterval = 0 }},
		{"MaxRetryInterval", func(c *Config) { c.MinRetryInterval, c.MaxRetryInterval = time.Minute, time.Second }},
		{"RetryBackoffFactor", func(c *Config) { c.RetryBackoffFactor = 0.9 }},
		{"RetryBackoffFactor", func(c *Config) { c.RetryBackoffFactor = math.NaN() }},
		{"RetryBackoffFactor", func(c *Config) { c.RetryBackoffFactor = math.Inf(1) }},
		{"FastFailureWindow", func(c *Config) { c.FastFailureWindow = -1 }},
		{"DialDelay", func(c *Config) { c.DialDelay = -time.Second }},
		{"PoolSize", func(c *Config) { c.PoolSize = 0 }},
		{"QueueSize", func(c *Config) { c.QueueSize = 0 }},
		{"ScanInterval", func(c *Config) { c.ScanInterval = 0 }},
		{"ScanSpread", func(c *Config) { c.ScanSpread = -time.Millisecond }},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: got %v, want a ConfigError for that field", tc.field, err)
		}
		if _, err := New(c, newMemDirectory(), noDial); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New accepted the config: %v", tc.field, err)
		}
	}
}

func TestConfig_ValidationReportsEveryField(t *testing.T) {
	err := Config{}.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *ConfigError
		if errors.As(e, &ce) {
			fields = append(fields, ce.Field)
		}
	}
	want := []string{"MinRetryInterval", "RetryBackoffFactor", "PoolSize", "QueueSize", "ScanInterval"}
	if !slices.Equal(fields, want) {
		t.Errorf("zero Config: fields %v, want %v", fields, want)
	}
}

func TestNextRetryDelay_FollowsTheSeedsRecurrence(t *testing.T) {
	c := DefaultConfig()
	// A source whose draws we can predict: the same seed, drawn alongside.
	rng, twin := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
	prev := time.Duration(0)
	for i := range 30 {
		got := c.NextRetryDelay(prev, rng)
		factor := max(1, c.RetryBackoffFactor+twin.Float64()-0.5)
		want := time.Duration(min(max(float64(prev)*factor, float64(c.MinRetryInterval)), float64(c.MaxRetryInterval)))
		if got != want {
			t.Fatalf("step %d: %v, want %v", i, got, want)
		}
		if i == 0 && got != c.MinRetryInterval {
			t.Fatalf("first delay %v, want Min", got)
		}
		prev = got
	}
	if prev != c.MaxRetryInterval {
		t.Errorf("after 30 failures the delay is %v, want the cap", prev)
	}
}

func TestNextRetryDelay_FactorFlooredAtOne(t *testing.T) {
	c := DefaultConfig()
	c.RetryBackoffFactor = 1 // draws in [0.5, 1.5): half would shrink the delay
	rng := testRand()
	prev := 10 * time.Second
	for range 1000 {
		next := c.NextRetryDelay(prev, rng)
		if next < prev {
			t.Fatalf("delay fell from %v to %v", prev, next)
		}
		prev = next
	}
}

func TestNextRetryDelay_NoOverflowNearMax(t *testing.T) {
	c := DefaultConfig()
	c.MaxRetryInterval = time.Duration(math.MaxInt64)
	c.RetryBackoffFactor = 100
	if got := c.NextRetryDelay(time.Duration(math.MaxInt64/2), testRand()); got != c.MaxRetryInterval {
		t.Errorf("got %v, want the cap", got)
	}
}

func noDial(context.Context, string, string) error { return nil }

func TestNew_RejectsMissingParts(t *testing.T) {
	if _, err := New(DefaultConfig(), nil, noDial); err == nil {
		t.Error("nil Directory accepted")
	}
	if _, err := New(DefaultConfig(), newMemDirectory(), nil); err == nil {
		t.Error("nil DialFunc accepted")
	}
}
