module github.com/hcomm-go/hcomm

go 1.26.0

require (
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
