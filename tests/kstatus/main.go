// kstatus reads one Kubernetes object as JSON on stdin (`kubectl get -o json` from the real API server)
// and prints the status that the kstatus library (sigs.k8s.io/cli-utils, what Flux and Argo CD's
// health checks follow) computes for it: "<Status>\t<message>", e.g. "Current\tResource is Ready".
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	// apimachinery's JSON keeps integers int64, as the API server's own objects have them.
	var object map[string]interface{}
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = json.Unmarshal(data, &object)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: stdin is not a JSON object:", err)
		os.Exit(2)
	}
	result, err := status.Compute(&unstructured.Unstructured{Object: object})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
	fmt.Printf("%s\t%s\n", result.Status, result.Message)
}
