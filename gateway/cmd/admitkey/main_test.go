package main

import (
	"testing"

	"github.com/onsale/onsale/shared/config/configtest"
)

func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "admitkey", &Config{})
}
