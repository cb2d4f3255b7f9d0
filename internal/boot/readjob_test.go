package boot

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/settings"
)

// TestNoSilentWeakToken: a job without a secret token is refused when its
// store or data ports face other hosts, unless HCOMM_INSECURE asks for it
// (and then every Init warns); on loopback it needs none.
func TestNoSilentWeakToken(t *testing.T) {
	cases := []struct {
		name      string
		env       map[string]string
		wantErr   bool
		wantWarn  bool
		hostStore string // expected rank 0 store address, torchrun style
	}{
		{name: "token", env: map[string]string{"HCOMM_STORE": "tcp://192.0.2.1:29500", "HCOMM_SOCKET_ADDR": "192.0.2.2", "HCOMM_TOKEN": "s3cret"}},
		{name: "remote store", env: map[string]string{"HCOMM_STORE": "tcp://192.0.2.1:29500", "HCOMM_SOCKET_ADDR": "127.0.0.1"}, wantErr: true},
		{name: "reachable data port", env: map[string]string{"HCOMM_STORE": "file:///tmp/x", "HCOMM_SOCKET_ADDR": "192.0.2.2"}, wantErr: true},
		{name: "torchrun on a network", env: map[string]string{"MASTER_ADDR": "192.0.2.1", "HCOMM_SOCKET_ADDR": "192.0.2.2"}, wantErr: true},
		{name: "insecure", env: map[string]string{"MASTER_ADDR": "192.0.2.1", "HCOMM_SOCKET_ADDR": "192.0.2.2", "HCOMM_INSECURE": "1"}, wantWarn: true, hostStore: ":29500"},
		{name: "file store on loopback", env: map[string]string{"HCOMM_STORE": "file:///tmp/x"}},
		{name: "torchrun on loopback", env: map[string]string{"MASTER_ADDR": "127.0.0.1"}, hostStore: "127.0.0.1:29500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HCOMM_RANK": "0", "HCOMM_SIZE": "2"}
			for k, v := range tc.env {
				env[k] = v
			}
			v, err := settings.Load(func(k string) (string, bool) { s, ok := env[k]; return s, ok })
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			j, err := ReadJob(settings.Config{}, nil, v, 0, slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.wantErr {
				if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), "HCOMM_TOKEN") || !strings.Contains(err.Error(), "HCOMM_INSECURE") {
					t.Fatalf("err = %v; want ErrInvalidArgument saying how to set a token", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Token == "" {
				t.Error("no token in effect")
			}
			if warned := strings.Contains(logs.String(), "without a secret token"); warned != tc.wantWarn {
				t.Errorf("warning logged = %v, want %v: %s", warned, tc.wantWarn, logs.String())
			}
			if strings.Contains(logs.String(), "s3cret") {
				t.Error("the token was logged")
			}
			if j.HostStore != tc.hostStore {
				t.Errorf("rank 0 serves the store on %q, want %q", j.HostStore, tc.hostStore)
			}
		})
	}
}

func TestEnvRankSize(t *testing.T) {
	for _, v := range []string{"HCOMM_RANK", "HCOMM_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
		"OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	tests := []struct {
		env        map[string]string
		rank, size int
		bad        bool
	}{
		{nil, 0, 1, false},
		{map[string]string{"HCOMM_RANK": "2", "HCOMM_SIZE": "4"}, 2, 4, false},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2"}, 1, 2, false},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"}, 3, 8, false},
		{map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, 5, 6, false},
		{map[string]string{"HCOMM_RANK": "0", "HCOMM_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 0, 2, false},
		{map[string]string{"HCOMM_RANK": "4", "HCOMM_SIZE": "4"}, 0, 0, true},
		{map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, 0, 0, true},
		{map[string]string{"SLURM_PROCID": "1"}, 0, 0, true},
	}
	for _, tt := range tests {
		for k, v := range tt.env {
			os.Setenv(k, v)
		}
		vals, err := settings.Load(settings.Env)
		if err != nil {
			t.Fatal(err)
		}
		rank, size, err := rankSize(vals)
		for k := range tt.env {
			os.Unsetenv(k)
		}
		if tt.bad {
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Errorf("%v: err = %v, want ErrInvalidArgument", tt.env, err)
			}
			continue
		}
		if err != nil || rank != tt.rank || size != tt.size {
			t.Errorf("%v: %d, %d, %v; want %d, %d", tt.env, rank, size, err, tt.rank, tt.size)
		}
	}
}
