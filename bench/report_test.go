package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/internal/compliance"
)

func TestComplianceMarkdown(t *testing.T) {
	var b bytes.Buffer
	complianceMarkdown(&b, []ServerResult{
		{Name: "reflector"},
		{Name: "steadydns", Compliance: []compliance.Result{{Case: "dns"}, {Case: "opcodeflg"}}},
		{Name: "knot", Compliance: []compliance.Result{{Case: "dns"}, {Case: "opcodeflg", Tags: []string{"rd"}}}},
	})
	for _, want := range []string{
		"| case | steadydns | knot |",
		"| dns | ok | ok |",
		"| opcodeflg | ok | fail: rd |",
		"| **passed** | 2/2 | 1/2 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "reflector") {
		t.Errorf("the reflector, which ran no case, has a column:\n%s", b.String())
	}
}
