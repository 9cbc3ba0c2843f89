package translator

import "errors"

// Errors of the translator: every error it returns wraps one of these, so
// callers match the cause with errors.Is.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("translator: bad config")
	// ErrNotListening: a collector answered none of the CM requests sent to
	// one of its service ports (CMTries requests, CMTimeout apart).
	ErrNotListening = errors.New("translator: collector not listening")
	// ErrRejected: a collector rejected a connection for another reason than
	// the end of its instances (REJ reason other than 8).
	ErrRejected = errors.New("translator: connection rejected")
	// ErrAdvertisement: a collector's advertisement was missing, malformed,
	// or described a geometry the translator cannot use.
	ErrAdvertisement = errors.New("translator: unusable advertisement")
	// ErrUnsupported: the advertisement names a primitive this build cannot
	// translate.
	ErrUnsupported = errors.New("translator: primitive not supported")
	// ErrClosed: the translator was closed.
	ErrClosed = errors.New("translator: closed")
)
