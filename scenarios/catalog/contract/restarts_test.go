package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChangedKeysNamesChangedAddedAndRemovedKeys(t *testing.T) {
	before := map[string][]byte{"tls.crt": []byte("a"), "tls.key": []byte("k"), "ca.crt": []byte("c")}
	after := map[string][]byte{"tls.crt": []byte("b"), "ca.crt": []byte("c"), "extra": []byte("x")}
	assert.Equal(t, []string{"extra (added)", "tls.crt", "tls.key (removed)"}, changedKeys(before, after))
}

func TestChangedKeysOfTheSameDataIsEmpty(t *testing.T) {
	data := map[string][]byte{"tls.crt": []byte("a")}
	assert.Empty(t, changedKeys(data, map[string][]byte{"tls.crt": []byte("a")}))
}
