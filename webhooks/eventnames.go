package webhooks

import (
	"fmt"
	"log/slog"
	"slices"
)

// EmitterEventNames returns every event name and event.action combination
// the emitter knows, sorted: the counterpart of octokit's emitterEventNames.
// It returns a new slice on each call; callers may modify it.
//
// The list is generated from GitHub's webhooks description, with the
// payload types of package payload (one event table: `go generate
// ./webhooks/payload/`). It holds every event of @octokit/webhooks 14.2.0
// plus "repository_dispatch.sample" from the project's original
// specification (payloadgen.ExtraEventNames).
func EmitterEventNames() []string {
	return slices.Clone(emitterEventNames[:])
}

// ValidateOptions configures ValidateEventName.
type ValidateOptions struct {
	// OnUnknownEventName says what an unknown name does: "" (or any other
	// value) returns an error wrapping ErrUnknownEventName, "warn" logs a
	// warning and returns nil, "ignore" returns nil silently.
	OnUnknownEventName string
	// Logger receives the "warn" warning. If nil, slog.Default() is used.
	Logger *slog.Logger
}

// ValidateEventName checks that name is an event or event.action name the
// emitter knows (see EmitterEventNames). Whatever opts says, "*" and "error"
// return an error wrapping ErrReservedEventName and "" returns
// ErrMissingName. For an unknown name it returns an error wrapping
// ErrUnknownEventName, or, as opts.OnUnknownEventName asks, logs a warning
// or does nothing.
func ValidateEventName(name string, opts ValidateOptions) error {
	switch name {
	case "":
		return ErrMissingName
	case AnyEventName:
		return fmt.Errorf("%w %q: use OnAny to handle every event", ErrReservedEventName, name)
	case ErrorEventName:
		return fmt.Errorf("%w %q: use OnError to handle errors", ErrReservedEventName, name)
	}
	if opts.OnUnknownEventName == "ignore" || knownEventName(name) {
		return nil
	}
	err := fmt.Errorf("%w %q (see https://docs.github.com/en/webhooks/webhook-events-and-payloads)", ErrUnknownEventName, name)
	if opts.OnUnknownEventName != "warn" {
		return err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn(err.Error(), "name", name)
	return nil
}

func knownEventName(name string) bool {
	_, found := slices.BinarySearch(emitterEventNames[:], name)
	return found
}
