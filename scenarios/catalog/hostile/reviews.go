package hostile

import (
	"context"
	"net/http"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// H2: well-formed JSON of the wrong kind or version.
func wrongReviews() types.Feature {
	var w *watch
	return features.New("H2 reviews of the wrong kind or version (a ConversionReview to an admission path, an AdmissionReview to /convert, unknown versions, objects of another kind) get a 400 naming what was expected").
		WithLabel(suite.LabelScenario, "H2").
		Setup(setup(&w, "H2")).
		Assess("every wrong kind and version is refused with what was expected and what came", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var checks []check
			for _, p := range w.webhookPaths {
				for _, r := range w.routes {
					for _, c := range wrongReviewCases(p) {
						checks = append(checks, w.onWebhook(r, rawhttp.Send(http.MethodPost, p.path, "application/json", []byte(c.body), c.what), answerBound, c.judge))
					}
				}
			}
			runChecks(ctx, t, "requests", 4, checks)
			return ctx
		}).
		Assess(heldStep, held(&w)).
		Feature()
}

type reviewCase struct {
	what, body string
	judge      func(rawhttp.Answer) string
}

func wrongReviewCases(p webhookPath) []reviewCase {
	if p.admission {
		return []reviewCase{
			{"a ConversionReview", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"nvidia.com/v1beta1","objects":[]}}`,
				inReview(http.StatusBadRequest, `expected an AdmissionReview of admission.k8s.io/v1, got kind "ConversionReview" of apiVersion "apiextensions.k8s.io/v1"`, answerBound)},
			{"an AdmissionReview of admission.k8s.io/v2", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`,
				inReview(http.StatusBadRequest, `got kind "AdmissionReview" of apiVersion "admission.k8s.io/v2"`, answerBound)},
			{"a Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
				inReview(http.StatusBadRequest, `got kind "Pod" of apiVersion "v1"`, answerBound)},
			{"an AdmissionReview of a Pod", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","kind":{"group":"","version":"v1","kind":"Pod"},` +
				`"namespace":"team-a","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"}}}}`,
				inReview(http.StatusBadRequest, "unable to decode /v1, Kind=Pod into", answerBound)},
			{"an AdmissionReview of a Dynamo object of an unknown version", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE",` +
				`"namespace":"team-a","object":{"apiVersion":"nvidia.com/v9","kind":"DynamoGraphDeployment","metadata":{"name":"g","namespace":"team-a"}}}}`,
				inReview(http.StatusBadRequest, `no kind "DynamoGraphDeployment" is registered for version "nvidia.com/v9"`, answerBound)},
			{"an AdmissionReview without a request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
				inReview(http.StatusBadRequest, "the AdmissionReview has no request", answerBound)},
			{"an AdmissionReview without an operation", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
				`"namespace":"team-a","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"g","namespace":"team-a"}}}}`,
				inReview(http.StatusBadRequest, `unknown operation ""`, answerBound)},
			{"an AdmissionReview with an unknown operation", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"EXPLODE",` +
				`"namespace":"team-a","object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{"name":"g","namespace":"team-a"}}}}`,
				inReview(http.StatusBadRequest, `unknown operation "EXPLODE"`, answerBound)},
		}
	}
	return []reviewCase{
		{"an AdmissionReview", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`,
			plain(http.StatusBadRequest, `expected a ConversionReview of apiextensions.k8s.io/v1, got kind "AdmissionReview" of apiVersion "admission.k8s.io/v1"`, answerBound, true)},
		{"a ConversionReview of apiextensions.k8s.io/v1beta1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"nvidia.com/v1beta1","objects":[]}}`,
			plain(http.StatusBadRequest, `got kind "ConversionReview" of apiVersion "apiextensions.k8s.io/v1beta1"`, answerBound, true)},
		{"a ConversionReview without a request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`,
			plain(http.StatusBadRequest, "the ConversionReview has no request", answerBound, true)},
		{"a ConversionReview to an unknown version", conversionReviewStart + `u","desiredAPIVersion":"nvidia.com/v9","objects":[{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeploymentRequest","metadata":{"name":"r"}}]}}`,
			conversionFailure("nvidia.com/v9", answerBound)},
		{"a ConversionReview of a Pod", conversionReviewStart + `u","desiredAPIVersion":"nvidia.com/v1beta1","objects":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}}`,
			conversionFailure("Pod", answerBound)},
	}
}
