package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/steadydns/steadydns/controlplane/config"
)

// TokenFile is the write token's file in server.state_dir when
// server.api_token_file is unset.
const TokenFile = "api.token"

// TokenPath is where the write token of a server configured with s is.
func TokenPath(s config.Server) string {
	if s.APITokenFile != "" {
		return s.APITokenFile
	}
	return filepath.Join(s.StateDir, TokenFile)
}

// ReadToken reads a token file: its text without surrounding white
// space, which must be neither empty nor hold white space or control
// characters, which a header cannot carry intact.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the api token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("reading the api token: %s is empty", path)
	case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", fmt.Errorf("reading the api token: %s holds white space or control characters within the token", path)
	}
	return token, nil
}

// tokens reads the write token and the read token of cfg's API. Without
// server.api_token_file the write token is state_dir's, made at the first
// start.
func tokens(cfg *config.Config) (write, read string, err error) {
	s := cfg.Server
	if s.APITokenFile != "" {
		if write, err = ReadToken(s.APITokenFile); err != nil {
			return "", "", cfg.Errorf("server.api_token_file", "%v", err)
		}
		warnOpen("server.api_token_file", s.APITokenFile)
	} else if write, err = stateToken(s.StateDir); err != nil {
		return "", "", cfg.Errorf("server.state_dir", "%v", err)
	}
	if s.APIReadTokenFile != "" {
		if read, err = ReadToken(s.APIReadTokenFile); err != nil {
			return "", "", cfg.Errorf("server.api_read_token_file", "%v", err)
		}
		if read == write {
			return "", "", cfg.Errorf("server.api_read_token_file", "holds the write token, so whoever may read could write; give the reads a token of their own")
		}
		warnOpen("server.api_read_token_file", s.APIReadTokenFile)
	}
	return write, read, nil
}

// warnOpen warns of a token file that others than its owner may read.
// The operator's own files are not refused: one may be shared on purpose
// with a group that runs steadydns status.
func warnOpen(key, path string) {
	if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
		slog.Warn("the api token file is readable by others than its owner: chmod 600 it unless it is shared on purpose", "key", key, "file", path, "mode", fmt.Sprintf("%04o", info.Mode().Perm()))
	}
}

// stateToken returns the token in dir, creating it with mode 0600 when
// there is none. One that others may read is refused: steadydns made it
// 0600, so someone changed it, and the token may have leaked.
func stateToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createToken(dir, path); err != nil {
			return "", err
		}
	}
	info, err := os.Lstat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the api token: %w", err)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("reading the api token: %s is not a regular file", path)
	case info.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("reading the api token: %s is open to others than its owner (mode %04o): chmod 600 it, or remove it for a new token", path, info.Mode().Perm())
	}
	return ReadToken(path)
}

// createToken writes 32 random bytes, hex, to path. The file is written
// whole under another name and linked into place, so that a second
// process starting at the same time reads either none or all of it, and
// never replaces it.
func createToken(dir, path string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the api token: %w", err)
	}
	f, err := os.CreateTemp(dir, TokenFile+".*")
	if err != nil {
		return fmt.Errorf("creating the api token: %w", err)
	}
	defer os.Remove(f.Name())
	secret := make([]byte, 32)
	rand.Read(secret) // never fails: it crashes the program rather than return an error
	_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(f.Name(), path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the api token: %w", err)
	}
	if err == nil {
		slog.Info("created the api token", "file", path)
	}
	return nil
}
