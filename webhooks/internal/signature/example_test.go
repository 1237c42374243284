package signature_test

import (
	"fmt"

	"github.com/hookline/hookline/webhooks/internal/signature"
)

func Example() {
	body := []byte(`{"foo":"bar"}`)
	sig, err := signature.Sign("mysecret", body)
	if err != nil {
		panic(err)
	}
	fmt.Println(sig)

	ok, err := signature.Verify("mysecret", body, sig)
	fmt.Println(ok, err)

	// During a secret rotation the new secret signs; the old one still verifies.
	ok, err = signature.VerifyWithFallback("newsecret", body, sig, "mysecret")
	fmt.Println(ok, err)
	// Output:
	// sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3
	// true <nil>
	// true <nil>
}
