package console

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDocsScreenshot refreshes docs/console-overview.png: with
// SLUICE_DOCS_SCREENSHOT=1 it runs steady traffic for a while (a
// producer and a consumer group that falls behind) and saves the
// overview page. Without the variable it skips.
//
//	SLUICE_DOCS_SCREENSHOT=1 go test ./internal/console -run DocsScreenshot
func TestDocsScreenshot(t *testing.T) {
	if os.Getenv("SLUICE_DOCS_SCREENSHOT") == "" {
		t.Skip("set SLUICE_DOCS_SCREENSHOT=1 to refresh docs/console-overview.png")
	}
	e := newEnv(t, envOpt{})
	// The fixture samples every 20 ms; a second console samples at 250 ms
	// so that the charts span a readable minute.
	s, err := New(Config{Broker: e.b, Gatherer: e.reg, SampleEvery: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url, err := s.ListenAndServe("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "payments", "clicks"} {
		e.createTopic(t, name, 3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	prod := e.client(t, kgo.ProducerLinger(5*time.Millisecond))
	cons := e.client(t, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.FetchMaxWait(100*time.Millisecond))
	go func() {
		for ctx.Err() == nil {
			cons.PollRecords(ctx, 200)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // a consumer slower than the producer
			}
		}
	}()
	end := time.Now().Add(40 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		topic := []string{"orders", "orders", "payments", "clicks"}[i%4]
		prod.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprintf(`{"n":%d,"amount":%d.%02d}`, i, i%500, i%100))}, nil)
		if i%50 == 0 {
			time.Sleep(time.Millisecond * time.Duration(1+i%7))
		}
	}
	prod.Flush(ctx)
	b := newBrowser(t, "http://"+url)
	b.open("#/")
	b.wait(chartsHavePoints)
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100 gives a PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console-overview.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	cancel()
}
