package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/hookline/hookline/proxy"
)

func ExampleDecode() {
	// What a gosmee server sends for a delivery (abridged).
	ev := proxy.SSEEvent{
		ID: "1700000100000-0",
		Data: []byte(`{"bodyB":"eyJ6ZW4iOiJLZWVwIGl0IGxvZ2ljYWxseSBhd2Vzb21lLiJ9",` +
			`"content-type":"application/json","timestamp":"1700000100000",` +
			`"x-github-delivery":"d3b07384","x-github-event":"ping",` +
			`"x-hub-signature-256":"sha256=0123"}`),
	}
	m, err := proxy.Decode(ev)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := m.Delivery
	fmt.Println(m.Kind, d.Format, d.Event, d.ID, d.Signature)
	fmt.Printf("%s from %s, exact: %v\n", d.Body, d.BodySource, d.BodySource.Exact())
	fmt.Println(d.Timestamp.Format("2006-01-02 15:04:05.000 MST"))

	// Control messages are not errors.
	m, _ = proxy.Decode(proxy.SSEEvent{Data: []byte(`{"message":"ready"}`)})
	fmt.Println(m.Kind, m.Name)
	// Output:
	// delivery gosmee ping d3b07384 sha256=0123
	// {"zen":"Keep it logically awesome."} from bodyB, exact: true
	// 2023-11-14 22:15:00.000 UTC
	// control ready
}

func ExampleStreamURL() {
	for _, f := range []proxy.Format{proxy.FormatSmee, proxy.FormatGosmee} {
		u, _ := proxy.StreamURL("https://hook.example/aBcDeFgHiJkL/", f)
		fmt.Println(f, u)
	}
	// Output:
	// smee https://hook.example/aBcDeFgHiJkL
	// gosmee https://hook.example/events/aBcDeFgHiJkL
}

func ExampleSubscribe() {
	// A relay speaking smee.io's format.
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 0\nevent: ready\ndata: {}\n\n"+
			`id: 1`+"\n"+`data: {"x-github-event":"issues","body":{"action":"opened"},"timestamp":1700000000000}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer relay.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := proxy.Subscribe(ctx, nil, proxy.StreamOptions{
		URL:     relay.URL + "/aBcDeFgHiJkL",
		OnState: func(c proxy.StateChange) { fmt.Println("state:", c.State) },
	}, func(ev proxy.SSEEvent) {
		m, err := proxy.Decode(ev)
		switch {
		case err != nil:
			fmt.Println("skipped:", err)
		case m.Kind == proxy.KindDelivery:
			fmt.Printf("%s delivery: %s\n", m.Delivery.Event, m.Delivery.Body)
			cancel() // one is enough here
		default:
			fmt.Println(m.Kind, m.Name)
		}
	})
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// state: connecting
	// state: connected
	// control ready
	// issues delivery: {"action":"opened"}
	// state: stopped
	// true
}
