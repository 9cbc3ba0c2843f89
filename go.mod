module github.com/dtakit/dtakit

go 1.25.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/gopacket/gopacket v1.7.7
	github.com/klauspost/crc32 v1.3.0
	golang.org/x/sys v0.47.0
)

require golang.org/x/net v0.55.0 // indirect
