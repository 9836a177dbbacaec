// Package statusbrowser holds the test that loads the status page in a real
// headless browser (Chromium, driven by chromedp) while a pipeline reads a
// local Kinesis stream: the page loads without console errors, its charts
// have data and move, and a screenshot is saved. It is a package of its own
// so that nothing else imports chromedp.
//
// The test needs a Chromium or Chrome binary in PATH, or named by
// WEIR_CHROMIUM (Debian: apt-get install -y chromium; .ci/run installs it).
// Outside CI it is skipped, saying so, when none is found; with CI set it
// fails. WEIR_SCREENSHOT_DIR names where the
// screenshot goes (default: the test's temporary directory, logged).
package statusbrowser
