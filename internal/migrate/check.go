package migrate

import (
	"errors"
	"os"

	"github.com/nodecache/nodecache/internal/agent"
)

// Check loads data as `nodecache check-config` (and so `nodecache run`)
// would, but for the files it names: they are the pod's (hosts files, the
// kube-dns ConfigMap's mount, a CA), not this machine's. A written config
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
	return agent.CheckConfig([]string{"--config", f.Name()}, agent.CheckOptions{SkipFiles: true})
}
