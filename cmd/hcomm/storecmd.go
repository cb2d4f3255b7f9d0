package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hcomm-go/hcomm/store"
)

// store: `hcomm store` serves a job's rendezvous store on its own, for jobs
// started by another launcher (srun, mpirun, a batch system):
//
//	hcomm store --listen 0.0.0.0:29500 --env-file store.env &
//	set -a; . ./store.env; set +a
//	srun -n 64 ./prog
//
// The token comes from --token, --token-file (its content, without
// surrounding blanks) or $HCOMM_TOKEN, in that order; given none, the store
// makes one (64 hex digits). Clients must present the same text as their
// HCOMM_TOKEN. With --env-file the store writes HCOMM_STORE=tcp://host:port
// and HCOMM_TOKEN=... (values quoted for a POSIX shell) into that file,
// created with mode 0600 whatever the umask and replacing any file of that
// name, and removes it when it stops; it prints nothing on standard output.
// Without --env-file it prints HCOMM_STORE=... on standard output, and
// HCOMM_TOKEN=... too when it made the token (redirected to a file, that
// file gets the umask's mode, often readable by every user, which the store
// then warns about: prefer --env-file). host is the --listen host or, when that is unspecified, this
// machine's first non-loopback IPv4 address. The store serves until SIGINT
// or SIGTERM. It never logs the token.

const storeUsage = `usage: hcomm store [--listen host:port] [--token TEXT | --token-file FILE] [--env-file FILE]

Serves a rendezvous store until interrupted and writes HCOMM_STORE=... and
HCOMM_TOKEN=... for the ranks' environment into --env-file (mode 0600), or
prints HCOMM_STORE=... (and HCOMM_TOKEN=... when it made the token). Flags:
`

// storeCmd runs `hcomm store` until SIGINT or SIGTERM.
func storeCmd(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serveStoreCmd(ctx, args, stdout, stderr)
}

// serveStoreCmd runs `hcomm store` until ctx ends.
func serveStoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, storeUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "0.0.0.0:29500", "`host:port` to serve on (port 0 picks a free port)")
	tokenFlag := fs.String("token", "", "the job token `text` (visible to other users in the process list; prefer --token-file)")
	tokenFile := fs.String("token-file", "", "read the job token from `file`")
	envFile := fs.String("env-file", "", "write HCOMM_STORE and HCOMM_TOKEN into `file` (mode 0600; removed when the store stops) instead of printing them")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("store: unexpected argument %q", fs.Arg(0))
	}
	token, generated, err := storeToken(*tokenFlag, *tokenFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := store.NewServer(store.ServerConfig{Token: token, Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Listen(*listen); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if host, err = firstIPv4(); err != nil {
			host = "127.0.0.1"
		}
	}
	url := "tcp://" + net.JoinHostPort(host, port)
	if *envFile != "" {
		if err := writeEnvFile(*envFile, url, token); err != nil {
			return fmt.Errorf("store: --env-file: %w", err)
		}
		defer os.Remove(*envFile)
	} else {
		fmt.Fprintf(stdout, "HCOMM_STORE=%s\n", url)
		if generated {
			fmt.Fprintf(stdout, "HCOMM_TOKEN=%s\n", token)
			if mode, ok := othersCanRead(stdout); ok {
				fmt.Fprintf(stderr, "hcomm store: warning: standard output is a file that other users can read (mode %#o) and now holds the token; use --env-file FILE\n", mode)
			}
		}
	}
	fmt.Fprintf(stderr, "hcomm store: serving on %s until interrupted\n", srv.Addr())
	<-ctx.Done()
	srv.Close()
	fmt.Fprintln(stderr, "hcomm store: stopped")
	return nil
}

// othersCanRead reports whether w is a regular file that users other than
// its owner may read, and its permission bits.
func othersCanRead(w io.Writer) (os.FileMode, bool) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	return st.Mode().Perm(), st.Mode().Perm()&0o044 != 0
}

// writeEnvFile writes HCOMM_STORE and HCOMM_TOKEN into path, a file of
// mode 0600: it writes a new file beside path and renames it over path, so
// that neither an existing file's mode nor the umask decides who may read
// the token, and a reader never sees half a file.
func writeEnvFile(path, url, token string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = fmt.Fprintf(f, "HCOMM_STORE=%s\nHCOMM_TOKEN=%s\n", shellQuote(url), shellQuote(token))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// storeToken picks the store's token: the --token text, the content of
// --token-file, $HCOMM_TOKEN, or a new random one (generated is then true).
func storeToken(text, file string) (token string, generated bool, err error) {
	switch {
	case text != "" && file != "":
		return "", false, errors.New("store: --token and --token-file exclude each other")
	case text != "":
		return text, false, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("store: %w", err)
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return "", false, fmt.Errorf("store: token file %s is empty", file)
		}
		return token, false, nil
	case os.Getenv("HCOMM_TOKEN") != "":
		return os.Getenv("HCOMM_TOKEN"), false, nil
	}
	b := make([]byte, tokenBytes)
	rand.Read(b)
	return hex.EncodeToString(b), true, nil
}
