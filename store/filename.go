package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxEscapedName bounds the escaped form of a key; longer keys are named by
// their hash, keeping every name well under common 255-byte limits.
const maxEscapedName = 200

// fileName maps a key to the name of the file that holds its value. The
// mapping is injective and every name is a single, ordinary path element:
//
//   - "k" followed by the key with every byte outside [a-z0-9_-] written as
//     "%xx" (lower-case hex), when that fits in maxEscapedName bytes;
//   - otherwise "h" followed by the hex SHA-256 of the key.
//
// Names contain only lower-case letters, digits, '_', '-' and '%', so they
// are safe on case-insensitive file systems, never start with '.' (the
// store's own files do), and cannot climb out of the directory.
func fileName(key string) string {
	var b strings.Builder
	b.Grow(1 + len(key))
	b.WriteByte('k')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if isPlain(c) {
			b.WriteByte(c)
		} else {
			const hexdig = "0123456789abcdef"
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
		}
		if b.Len() > maxEscapedName {
			sum := sha256.Sum256([]byte(key))
			return "h" + hex.EncodeToString(sum[:])
		}
	}
	return b.String()
}

func isPlain(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// keyFromFileName inverts fileName for escaped names. It reports false for
// hashed names and for names fileName never produces.
func keyFromFileName(name string) (string, bool) {
	if len(name) == 0 || name[0] != 'k' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(name); i++ {
		c := name[i]
		switch {
		case isPlain(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(name):
			v, err := hex.DecodeString(name[i+1 : i+3])
			if err != nil || isPlain(v[0]) || name[i+1:i+3] != hex.EncodeToString(v) {
				return "", false
			}
			b.WriteByte(v[0])
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}
