package capture_test

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
)

func Example() {
	dir, err := os.MkdirTemp("", "captures")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	path, err := capture.Write(dir, capture.File{Delivery: delivery.Delivery{
		ID:         "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Event:      "ping",
		ReceivedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Headers:    http.Header{"Content-Type": {"application/json"}},
		Body:       []byte(`{"zen":"Keep it logically awesome."}`),
	}})
	if err != nil {
		panic(err)
	}
	d, err := capture.Read(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Event, d.ID)
	fmt.Println(string(d.Body))
	// Output:
	// ping 72d3162e-cc78-11e3-81ab-4c9367dc0958
	// {"zen":"Keep it logically awesome."}
}
