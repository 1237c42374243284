package payload_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/hookline/hookline/webhooks/payload"
)

// A delivery's body decodes into the type of its event and action, and
// encodes back with every property it had, named or not.
func Example() {
	body := []byte(`{"action":"opened","issue":{"number":7,"title":"Hello"},"repository":{"full_name":"octo/hello"},"brand_new":true}`)
	var p payload.IssuesOpenedEvent
	if err := json.Unmarshal(body, &p); err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.EventName(), p.Repository.FullName, p.Issue.Number, p.Issue.Title)

	// New picks the type from a name, for code that handles any event.
	v := payload.New("issues.opened")
	fmt.Printf("%T\n", v)

	out, _ := json.Marshal(&p)
	var back map[string]any
	json.Unmarshal(out, &back)
	fmt.Println("brand_new kept:", back["brand_new"])
	// Output:
	// issues.opened octo/hello 7 Hello
	// *payload.IssuesOpenedEvent
	// brand_new kept: true
}
