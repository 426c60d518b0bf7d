package main

import (
	"testing"

	"github.com/onsale/onsale/shared/config/configtest"
)

func TestReadme(t *testing.T) {
	configtest.CheckReadme(t, "../../../README.md", "admitkey", &Config{})
}
