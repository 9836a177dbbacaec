package dynamotable

import "fmt"

// CheckName reports why name cannot name a DynamoDB table, or nil if it
// can. DynamoDB's rule: 3 to 255 characters, each of a-z A-Z 0-9 _ . -.
// The error names the rule, for a config's problems ("Table: table name
// ...").
func CheckName(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("table name %q: length %d, must be 3 to 255 characters", name, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("table name %q: byte %d (%q) not allowed, use only a-z A-Z 0-9 _ . -", name, i, c)
		}
	}
	return nil
}
