package worker

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"example.com/pifleet/transport/pirpc"
)

// autoAnswer looks a dialog up in a bundle's ui.autoAnswer map: first
// "method:title", then "title", then "method".
func autoAnswer(answers map[string]any, method, title string) (any, bool) {
	for _, key := range []string{method + ":" + title, title, method} {
		if v, ok := answers[key]; ok {
			return v, true
		}
	}
	return nil, false
}

// dialogResponse builds pi's extension_ui_response for an answer to a
// dialog of that method. A nil value or cancelled cancels the dialog.
func dialogResponse(id, method string, value any, cancelled bool) ([]byte, error) {
	resp := pirpc.ExtensionUIResponse{ID: id}
	switch {
	case cancelled || value == nil:
		resp.Cancelled = true
	case method == "confirm":
		b, err := confirmValue(value)
		if err != nil {
			return nil, err
		}
		resp.Confirmed = &b
	default:
		s, ok := value.(string)
		if !ok {
			s = fmt.Sprint(value)
		}
		resp.Value = &s
	}
	return pirpc.EncodeCommand("", resp)
}

func confirmValue(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "yes", "true", "y":
			return true, nil
		case "no", "false", "n":
			return false, nil
		}
	}
	return false, fmt.Errorf("%w: a confirm answer must be a bool or yes/no, got %v", ErrBadCommand, v)
}

// safeDefault is the answer given to a dialog nobody answered: decline a
// confirm, cancel the others.
func safeDefault(id, method string) []byte {
	var line []byte
	if method == "confirm" {
		line, _ = dialogResponse(id, method, false, false)
	} else {
		line, _ = dialogResponse(id, method, nil, true)
	}
	return line
}

// newUIRequest is the typed view of a dialog request.
func newUIRequest(u *pirpc.UIRequest) *UIRequest {
	return &UIRequest{
		RequestID:   u.ID,
		Kind:        u.Method,
		Title:       u.Title,
		Message:     u.Message,
		Options:     u.Options,
		Placeholder: u.Placeholder,
		Prefill:     u.Prefill,
		Timeout:     time.Duration(u.Timeout * float64(time.Millisecond)),
	}
}

// dialogWait is how long the worker waits for an answer: DialogTimeout,
// or the dialog's own shorter timeout (pi then resolves it by itself).
func dialogWait(spec time.Duration, own time.Duration) time.Duration {
	if own > 0 && own < spec {
		return own
	}
	return spec
}

// commandType returns the "type" of a raw command.
func commandType(raw json.RawMessage) (string, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if head.Type == nil || *head.Type == "" {
		return "", fmt.Errorf("%w: no \"type\"", ErrBadCommand)
	}
	return *head.Type, nil
}
