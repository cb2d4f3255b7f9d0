package store_test

import (
	"log"
	"os"
)

func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}
