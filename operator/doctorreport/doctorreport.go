// Package doctorreport is the webhook doctors' JSON report (`-o json`): an array of Result, one
// per check, in the order the checks ran. Its shape is documented and fixed; the doctors print
// it and programs that run them (the e2e harness among them) read it with this package, which
// imports nothing but the standard library.
package doctorreport

// Status is how a check ended.
type Status string

// The statuses of a Result.
const (
	// StatusPass: the check passed.
	StatusPass Status = "pass"
	// StatusFail: the check failed and nothing upstream explains it: a root cause.
	StatusFail Status = "fail"
	// StatusConsequence: the check failed, but an upstream check failed first and explains it.
	StatusConsequence Status = "consequence"
	// StatusSkipped: an input of the check comes from an upstream check that did not pass.
	StatusSkipped Status = "skipped"
)

// Result is one check's outcome, as printed (one line in text, one object in JSON).
type Result struct {
	// ID is the check's stable identifier, e.g. "webhook-service".
	ID string `json:"id"`
	// Title says what the check verifies, with the names of the objects it looked at.
	Title string `json:"title"`
	// OK is true only for StatusPass.
	OK bool `json:"ok"`
	// Status says whether the check passed, is a root cause, a consequence, or was skipped.
	Status Status `json:"status"`
	// Scenario is the troubleshooting scenario (T1…T11) the cause is documented as, if any.
	Scenario string `json:"scenario,omitempty"`
	// Cause is the one cause of a failure.
	Cause string `json:"cause,omitempty"`
	// Fix is the command (or commands, one per line) that fixes it.
	Fix string `json:"fix,omitempty"`
	// Details are the facts the check found (names, addresses, certificate fields, error text).
	Details []string `json:"details,omitempty"`
	// DependsOn lists, for a skipped or consequential check, the upstream root causes.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Name names the check as the text report's summary line names a root cause: its ID, with the
// troubleshooting scenario it is documented as, e.g. "ca-bundle (T3)".
func (r Result) Name() string {
	if r.Scenario == "" {
		return r.ID
	}
	return r.ID + " (" + r.Scenario + ")"
}
