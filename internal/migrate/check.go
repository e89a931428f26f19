package migrate

import (
	"errors"
	"os"

	"github.com/nodecache/nodecache/internal/agent"
)

// Check parses data as `nodecache run --config` would: a written config
// that fails it is a bug in the translation.
func Check(data []byte) error {
	f, err := os.CreateTemp("", "nodecache-migrate-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = agent.ParseConfig([]string{"--config", f.Name()})
	return err
}
