package agent

import "fmt"

// logFormat is the --log-format value: how the agent writes its logs.
type logFormat string

// Log formats accepted by --log-format.
const (
	logFormatText logFormat = "text"
	logFormatJSON logFormat = "json"
)

// Validate reports a format other than text or json, naming the flag.
func (f logFormat) Validate() error {
	switch f {
	case logFormatText, logFormatJSON:
		return nil
	}
	return fmt.Errorf("--log-format %q: want text or json", string(f))
}
