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
	// ErrNoInstance: a submitted report's collector has no ready instance
	// of its primitive (not connected yet, or none advertised).
	ErrNoInstance = errors.New("translator: no instance")
	// ErrBusy: a submitted report's QP cannot take more packets now; try
	// again once acknowledgements free its ring.
	ErrBusy = errors.New("translator: busy")
	// ErrReport: a submitted report is malformed or its instance's geometry
	// refuses it.
	ErrReport = errors.New("translator: report refused")
	// ErrClosed: the translator was closed.
	ErrClosed = errors.New("translator: closed")
)
