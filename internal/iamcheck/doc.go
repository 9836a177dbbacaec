// Package iamcheck holds the test that keeps weir's least-privilege IAM
// policies (docs/iam) true: it runs each configuration against the local
// servers, records the action of every request weir sends, and fails when
// one is missing from the configuration's policy, or when a policy grants
// an action weir never calls. It has no code of its own.
package iamcheck
