package relay

import "testing"

// The expectations are qs's documented results (the qs README), and
// Express's options for a query string and body-parser's for a form body.
func TestParseQS(t *testing.T) {
	tests := []struct {
		name, in string
		opts     qsOptions
		want     string
	}{
		{"flat", "a=c", queryOptions, `{"a":"c"}`},
		{"nested", "foo[bar]=baz", queryOptions, `{"foo":{"bar":"baz"}}`},
		{"encoded brackets", "a%5Bb%5D=c", queryOptions, `{"a":{"b":"c"}}`},
		{"lowercase encoded brackets", "a%5bb%5d=c", queryOptions, `{"a":{"b":"c"}}`},
		{"deep", "foo[bar][baz]=foobarbaz", queryOptions, `{"foo":{"bar":{"baz":"foobarbaz"}}}`},
		{"beyond depth 5", "a[b][c][d][e][f][g][h][i]=j", queryOptions, `{"a":{"b":{"c":{"d":{"e":{"f":{"[g][h][i]":"j"}}}}}}}`},
		{"form depth 32", "a[b][c][d][e][f][g][h][i]=j", formOptions, `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":"j"}}}}}}}}}`},
		{"push", "a[]=b&a[]=c", queryOptions, `{"a":["b","c"]}`},
		{"indexes out of order", "a[1]=c&a[0]=b", queryOptions, `{"a":["b","c"]}`},
		{"sparse compacted", "a[1]=b&a[15]=c", queryOptions, `{"a":["b","c"]}`},
		{"empty pushed", "a[]=&a[]=b", queryOptions, `{"a":["","b"]}`},
		{"empty indexed", "a[0]=b&a[1]=&a[2]=c", queryOptions, `{"a":["b","","c"]}`},
		{"index over arrayLimit 20", "a[100]=b", queryOptions, `{"a":{"100":"b"}}`},
		{"index within form arrayLimit 100", "a[100]=b", formOptions, `{"a":["b"]}`},
		{"index over form arrayLimit", "a[101]=b", formOptions, `{"a":{"101":"b"}}`},
		{"index and key mixed", "a[0]=b&a[b]=c", queryOptions, `{"a":{"0":"b","b":"c"}}`},
		{"objects in arrays", "a[][b]=c", queryOptions, `{"a":[{"b":"c"}]}`},
		{"repeated keys", "a=b&a=c", queryOptions, `{"a":["b","c"]}`},
		{"repeated nested keys", "a[b]=1&a[b]=2", queryOptions, `{"a":{"b":["1","2"]}}`},
		{"plain then nested", "a=d&a[b]=c", queryOptions, `{"a":["d",{"b":"c"}]}`},
		{"nested then plain", "a[b]=c&a=d", queryOptions, `{"a":{"b":"c","d":true}}`},
		{"plus is space", "a+b=c+d", queryOptions, `{"a b":"c d"}`},
		{"encoded plus", "a=%2B", queryOptions, `{"a":"+"}`},
		{"bad escape kept", "a=%E0%A4%A+x", queryOptions, `{"a":"%E0%A4%A x"}`},
		{"invalid UTF-8 kept", "a=%FF", queryOptions, `{"a":"%FF"}`},
		{"no value", "a&b=", queryOptions, `{"a":"","b":""}`},
		{"empty keys skipped", "&&=x&a=1", queryOptions, `{"a":"1"}`},
		{"JavaScript key order", "b=1&a=2&10=x&2=y", queryOptions, `{"2":"y","10":"x","b":"1","a":"2"}`},
		{"__proto__ dropped", "__proto__[x]=1&a[__proto__]=2", queryOptions, `{"a":{}}`},
		{"unbalanced bracket", "a[b=c", queryOptions, `{"a[b":"c"}`},
		{"leading bracket", "[a]=b", queryOptions, `{"a":"b"}`},
		{"GitHub form delivery", "payload=%7B%22action%22%3A%22opened%22%7D", formOptions, `{"payload":"{\"action\":\"opened\"}"}`},
		{"quotes and controls escaped", "a=%22%5C%0A%01", queryOptions, `{"a":"\"\\\n\u0001"}`},
		{"empty", "", queryOptions, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(appendQSJSON(nil, parseQS(tt.in, tt.opts)))
			if got != tt.want {
				t.Errorf("parseQS(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseQSParameterLimit(t *testing.T) {
	in := "a=1"
	for i := 0; i < 1500; i++ {
		in += "&b=2"
	}
	got := parseQS(in, formOptions)
	arr, ok := got.m["b"].(*qsArray)
	if !ok || len(arr.items) != 999 {
		t.Fatalf("parseQS with 1501 parameters kept %v values of b, want the first 1000 parameters (999 of b)", got.m["b"])
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"tab\there\r\n\b\f", `"tab\there\r\n\b\f"`},
		{"\x00\x1f\x7f", `"\u0000\u001f` + "\x7f" + `"`},
		{"héllo ☃", `"héllo ☃"`},
		{"bad \xff byte", `"bad \ufffd byte"`},
		{"\u2028", "\"\u2028\""},
	}
	for _, tt := range tests {
		if got := string(appendJSONString(nil, tt.in)); got != tt.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
