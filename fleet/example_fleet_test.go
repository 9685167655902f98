package fleet_test

import (
	"fmt"
	"log"

	"example.com/pifleet/fleet"
)

func ExampleParseAgent() {
	a, err := fleet.ParseAgent("buildbox=100.64.0.7:9788,buildbox.tail1234.ts.net:9788")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Name, a.Addresses)
	_, err = fleet.ParseAgent("buildbox")
	fmt.Println(err)
	// Output:
	// buildbox [100.64.0.7:9788 buildbox.tail1234.ts.net:9788]
	// fleet: invalid agent: "buildbox" is not NAME=HOST:PORT
}
