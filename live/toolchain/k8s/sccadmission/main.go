// OpenShift's SecurityContextConstraints admission, served as a pod admission webhook for the live tier
// (docs/live.md "SCC admission").
//
// The plugin is OpenShift's own, unchanged: github.com/openshift/apiserver-library-go
// pkg/securitycontextconstraints/sccadmission, the `security.openshift.io/SecurityContextConstraint` plugin
// OpenShift's kube-apiserver runs. It is given what that kube-apiserver gives it: an SCC informer
// (openshift/client-go), a namespace informer, and an authorizer that is the API server's own (every `use` check is a
// SubjectAccessReview, not cached: RBAC grants decide, as in-process). Each AdmissionReview's v1 Pod becomes the
// internal core.Pod the plugin works on, with the request's user; the mutating call runs Admit (which picks the SCC,
// fills in the security context and annotates openshift.io/scc) and answers with the change as a JSON patch; the
// validating call runs Validate. A refusal carries the plugin's own status (HTTP 403 and its message).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	coreapi "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the internal Pod and its conversions from and to v1

	securityclient "github.com/openshift/client-go/security/clientset/versioned"
	securityinformers "github.com/openshift/client-go/security/informers/externalversions"

	"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the API server to admit for, and to ask (informers, SubjectAccessReviews)")
	listen := flag.String("listen", "127.0.0.1:9443", "address of the webhook server (HTTPS)")
	certDir := flag.String("cert-dir", "", "folder with tls.crt and tls.key, the serving certificate")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	// Two SubjectAccessReviews per SCC tried (the pod's service account, then the requesting user) on each of two
	// calls per pod: a thousand pods at once must not wait on a client-side rate limit.
	config.QPS, config.Burst = 1000, 2000
	kube := kubernetes.NewForConfigOrDie(config)
	security := securityclient.NewForConfigOrDie(config)

	// The API server's own authorization, asked every time: an allow or deny is not cached (OpenShift's kube-apiserver
	// authorizes in-process), so a grant removed by hand counts for the next pod.
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             0,
		DenyCacheTTL:              0,
		WebhookRetryBackoff:       &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		log.Fatalf("authorizer: %v", err)
	}

	stop := make(chan struct{})
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	securityInformers := securityinformers.NewSharedInformerFactory(security, 0)
	plugin := sccadmission.NewConstraint()
	admission.PluginInitializers{
		initializer.New(kube, nil, kubeInformers, authz, nil, stop, nil),
		sccadmission.NewInitializer(securityInformers.Security().V1().SecurityContextConstraints()),
	}.Initialize(plugin)
	if err := admission.ValidateInitialization(plugin); err != nil {
		log.Fatalf("the SCC admission plugin is not initialized: %v", err)
	}
	kubeInformers.Start(stop)
	securityInformers.Start(stop)
	synced := []cache.InformerSynced{
		kubeInformers.Core().V1().Namespaces().Informer().HasSynced,
		securityInformers.Security().V1().SecurityContextConstraints().Informer().HasSynced,
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", review(plugin, true))
	mux.HandleFunc("/validate", review(plugin, false))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		for _, s := range synced {
			if !s() {
				http.Error(w, "informers not synced", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	server := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("serving SCC admission on https://%s (/mutate, /validate, /readyz)", *listen)
	log.Fatal(server.ListenAndServeTLS(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key")))
}

type plugin interface {
	admission.MutationInterface
	admission.ValidationInterface
}

// review answers one AdmissionReview: Admit on the mutating call, Validate on the validating one.
func review(p plugin, mutating bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: decide(r.Context(), p, mutating, in.Request)}
		out.Response.UID = in.Request.UID
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

func decide(ctx context.Context, p plugin, mutating bool, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	pod, original, err := internalPod(req.Object.Raw)
	if err != nil {
		return refuse(apierrors.NewBadRequest(fmt.Sprintf("the request's object: %v", err)))
	}
	var old runtime.Object
	if len(req.OldObject.Raw) > 0 {
		if old, _, err = internalPod(req.OldObject.Raw); err != nil {
			return refuse(apierrors.NewBadRequest(fmt.Sprintf("the request's old object: %v", err)))
		}
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	who := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra}
	dryRun := req.DryRun != nil && *req.DryRun
	attrs := admission.NewAttributesRecord(pod, old, coreapi.Kind("Pod").WithVersion(""), req.Namespace, req.Name,
		coreapi.Resource("pods").WithVersion(""), req.SubResource, admission.Operation(req.Operation), nil, dryRun, who)

	call := "validate"
	if mutating {
		call = "admit"
		err = p.Admit(ctx, attrs, nil)
	} else {
		err = p.Validate(ctx, attrs, nil)
	}
	name := req.Namespace + "/" + req.Name
	if err != nil {
		log.Printf("%s %s %s as %s: refused: %v", call, req.Operation, name, req.UserInfo.Username, err)
		return refuse(err)
	}
	response := &admissionv1.AdmissionResponse{Allowed: true}
	if mutating {
		patch, err := patchOf(original, pod)
		if err != nil {
			return refuse(apierrors.NewInternalError(err))
		}
		if len(patch) > 0 {
			raw, _ := json.Marshal(patch)
			kind := admissionv1.PatchTypeJSONPatch
			response.Patch, response.PatchType = raw, &kind
		}
	}
	log.Printf("%s %s %s as %s: admitted under %s", call, req.Operation, name, req.UserInfo.Username, pod.Annotations["openshift.io/scc"])
	return response
}

// internalPod is the v1 Pod of an AdmissionReview as the internal core.Pod admission plugins work on (the API server
// decodes and defaults before admission, so the object is already defaulted), and the v1 Pod's JSON as the patch's base.
func internalPod(raw []byte) (*coreapi.Pod, []byte, error) {
	var external corev1.Pod
	if err := json.Unmarshal(raw, &external); err != nil {
		return nil, nil, err
	}
	pod := &coreapi.Pod{}
	if err := legacyscheme.Scheme.Convert(&external, pod, nil); err != nil {
		return nil, nil, err
	}
	base, err := json.Marshal(&external)
	return pod, base, err
}

func refuse(err error) *admissionv1.AdmissionResponse {
	status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	if known, ok := err.(apierrors.APIStatus); ok {
		status = known.Status()
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &status}
}

type operation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"` // absent only from a remove: a replace by null says "null"
}

func valued(op, path string, v any) operation {
	raw, _ := json.Marshal(v)
	return operation{Op: op, Path: path, Value: raw}
}

// patchOf is the JSON patch from the v1 Pod's JSON to the admitted internal pod's, converted back to v1.
func patchOf(base []byte, admitted *coreapi.Pod) ([]operation, error) {
	external := &corev1.Pod{}
	if err := legacyscheme.Scheme.Convert(admitted, external, nil); err != nil {
		return nil, err
	}
	after, err := json.Marshal(external)
	if err != nil {
		return nil, err
	}
	var from, to any
	if err := json.Unmarshal(base, &from); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(after, &to); err != nil {
		return nil, err
	}
	var ops []operation
	diff("", from, to, &ops)
	return ops, nil
}

// diff appends the operations that make `from` into `to`: objects key by key, lists of the same length item by item
// (a container's securityContext, not the whole list), anything else replaced whole.
func diff(path string, from, to any, ops *[]operation) {
	fromMap, okFrom := from.(map[string]any)
	toMap, okTo := to.(map[string]any)
	if okFrom && okTo {
		for k := range fromMap {
			if _, kept := toMap[k]; !kept {
				*ops = append(*ops, operation{Op: "remove", Path: path + "/" + escape(k)})
			}
		}
		for k, v := range toMap {
			if was, had := fromMap[k]; had {
				diff(path+"/"+escape(k), was, v, ops)
			} else {
				*ops = append(*ops, valued("add", path+"/"+escape(k), v))
			}
		}
		return
	}
	fromList, okFrom := from.([]any)
	toList, okTo := to.([]any)
	if okFrom && okTo && len(fromList) == len(toList) {
		for i := range fromList {
			diff(path+"/"+strconv.Itoa(i), fromList[i], toList[i], ops)
		}
		return
	}
	if !reflect.DeepEqual(from, to) {
		*ops = append(*ops, valued("replace", path, to))
	}
}

// escape is a key as a JSON pointer segment (RFC 6901): "openshift.io/scc" is "openshift.io~1scc".
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
