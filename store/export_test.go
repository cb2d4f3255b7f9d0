package store

// CheckNoLeaks is checkNoLeaks for the package's external tests.
var CheckNoLeaks = checkNoLeaks
