package store

import (
	"reflect"
	"testing"
)

// storedServiceRecord is a service's record as edgelb wrote it before
// encoding/json wrote them (a hand encoder, byte for byte encoding/json's
// output; bbolt files and etcd keys in the field hold such records). The
// families list is base64, as encoding/json writes a []uint8.
const storedServiceRecord = `{"v":1,"origin":"config","spec":{"name":"web","vips":["192.0.2.10"],"families":"BAY=","pool":"p1","sharingKey":"k",` +
	`"ports":[{"name":"http","port":80,"protocol":6,"nodePort":30080,"targetPort":8080}],"backends":[{"address":"198.51.100.2","port":8080,"weight":3}],` +
	`"scheduler":"wrr","affinityTimeout":180000000000,"method":"nat","healthCheck":{"type":"http","path":"/healthz","interval":1000000000,"timeout":1000000000,"rise":2,"fall":3}}}`

// TestStoredServiceRecordCompatible: a record already on disk decodes to
// the service it was written from, and is written back as the same bytes
// (so a gateway upgraded in a fleet writes what its older peers read).
func TestStoredServiceRecordCompatible(t *testing.T) {
	want := testService("web", OriginConfig)
	got, err := decodeService("web", []byte(storedServiceRecord))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant    %+v", got, want)
	}
	enc, err := encodeService(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != storedServiceRecord {
		t.Fatalf("written as\n%s\nwas\n%s", enc, storedServiceRecord)
	}
}
