package console

import (
	"strings"
	"testing"
)

// TestConsoleURLWithCredentials opens the console of a SASL broker as
// http://alice:alice-pw@host/, a form people bookmark: the pages load
// (fetch refuses relative URLs on such a page, so the console builds its
// requests from the page's origin) and show alice's topic.
func TestConsoleURLWithCredentials(t *testing.T) {
	e := newSecureEnv(t)
	e.setup(t)
	url := strings.Replace(e.url, "http://", "http://alice:alice-pw@", 1)
	b := newBrowser(t, url)
	b.open("#/topics")
	if s := b.text("#topics-table"); !strings.Contains(s, "orders") || strings.Contains(s, "secret") {
		t.Errorf("topics table as alice: %s", s)
	}
	b.noErrors("topics with credentials in the URL")
}
