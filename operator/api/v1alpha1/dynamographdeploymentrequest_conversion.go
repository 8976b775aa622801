package v1alpha1

import (
	"encoding/json"
	"fmt"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// DGDRConversionAnnotation carries the parts of a v1beta1 DynamoGraphDeploymentRequest that
// v1alpha1 cannot express, so that v1beta1 → v1alpha1 → v1beta1 is lossless. It only ever
// appears on v1alpha1 objects: ConvertTo consumes it and never copies it into the hub.
const DGDRConversionAnnotation = "nvidia.com/dgdr-v1beta1-conversion-data"

// dgdrConversionData is the JSON payload of DGDRConversionAnnotation.
type dgdrConversionData struct {
	// SearchStrategy holds a v1beta1 search strategy that useAIConfigurator cannot express
	// (anything other than rapid, thorough or unset).
	SearchStrategy v1beta1.SearchStrategy `json:"searchStrategy,omitempty"`
}

var _ conversion.Convertible = &DynamoGraphDeploymentRequest{}

// ConvertTo converts this v1alpha1 request to the v1beta1 hub.
//
// profilingConfig.profilerImage becomes image and useAIConfigurator becomes searchStrategy
// (true = rapid, false = thorough, unset = unset); sla.ttft/itl become
// sla.ttftMilliseconds/itlMilliseconds; status.state becomes status.phase. A profilingConfig
// that sets nothing has no v1beta1 counterpart and converts to "absent".
func (src *DynamoGraphDeploymentRequest) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1beta1.DynamoGraphDeploymentRequest)
	if !ok {
		return fmt.Errorf("converting DynamoGraphDeploymentRequest %s/%s to v1beta1: unexpected hub type %T", src.Namespace, src.Name, dstRaw)
	}

	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	data, err := takeDGDRConversionData(&dst.ObjectMeta)
	if err != nil {
		return fmt.Errorf("converting DynamoGraphDeploymentRequest %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}

	dst.Spec = v1beta1.DynamoGraphDeploymentRequestSpec{
		Model:     src.Spec.Model,
		Backend:   v1beta1.Backend(src.Spec.Backend),
		AutoApply: src.Spec.AutoApply,
	}
	if pc := src.Spec.ProfilingConfig; pc != nil {
		dst.Spec.Image = pc.ProfilerImage
		dst.Spec.SearchStrategy = searchStrategyFor(pc.UseAIConfigurator)
	}
	// The annotation only applies while v1alpha1 still shows "unset": a client that has since
	// chosen useAIConfigurator wins over the stale hub value.
	if dst.Spec.SearchStrategy == "" && data.SearchStrategy != "" {
		dst.Spec.SearchStrategy = data.SearchStrategy
	}
	if src.Spec.SLA != nil {
		dst.Spec.SLA = &v1beta1.SLA{TTFTMilliseconds: src.Spec.SLA.TTFT, ITLMilliseconds: src.Spec.SLA.ITL}
	}

	dst.Status = v1beta1.DynamoGraphDeploymentRequestStatus{
		Phase:              v1beta1.Phase(src.Status.State),
		ObservedGeneration: src.Status.ObservedGeneration,
		Conditions:         src.Status.DeepCopy().Conditions,
	}
	return nil
}

// ConvertFrom converts the v1beta1 hub to this v1alpha1 version (the inverse of ConvertTo).
func (dst *DynamoGraphDeploymentRequest) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1beta1.DynamoGraphDeploymentRequest)
	if !ok {
		return fmt.Errorf("converting DynamoGraphDeploymentRequest to v1alpha1: unexpected hub type %T", srcRaw)
	}

	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	// ConvertTo never writes the annotation into a hub, so one found here was set by hand
	// through v1beta1: drop it unread (a malformed copy must not make the object unreadable)
	// so it cannot shadow the data computed below.
	dropDGDRConversionData(&dst.ObjectMeta)

	dst.Spec = DynamoGraphDeploymentRequestSpec{
		Model:     src.Spec.Model,
		Backend:   string(src.Spec.Backend),
		AutoApply: src.Spec.AutoApply,
	}
	useAIConfigurator, representable := useAIConfiguratorFor(src.Spec.SearchStrategy)
	if src.Spec.Image != "" || useAIConfigurator != nil {
		dst.Spec.ProfilingConfig = &ProfilingConfig{ProfilerImage: src.Spec.Image, UseAIConfigurator: useAIConfigurator}
	}
	if !representable {
		if err := putDGDRConversionData(&dst.ObjectMeta, dgdrConversionData{SearchStrategy: src.Spec.SearchStrategy}); err != nil {
			return fmt.Errorf("converting DynamoGraphDeploymentRequest %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
		}
	}
	if src.Spec.SLA != nil {
		dst.Spec.SLA = &SLA{TTFT: src.Spec.SLA.TTFTMilliseconds, ITL: src.Spec.SLA.ITLMilliseconds}
	}

	dst.Status = DynamoGraphDeploymentRequestStatus{
		State:              string(src.Status.Phase),
		ObservedGeneration: src.Status.ObservedGeneration,
		Conditions:         src.Status.DeepCopy().Conditions,
	}
	return nil
}

func searchStrategyFor(useAIConfigurator *bool) v1beta1.SearchStrategy {
	switch {
	case useAIConfigurator == nil:
		return ""
	case *useAIConfigurator:
		return v1beta1.SearchStrategyRapid
	default:
		return v1beta1.SearchStrategyThorough
	}
}

// useAIConfiguratorFor maps a search strategy to useAIConfigurator; representable is false
// for strategies v1alpha1 has no value for.
func useAIConfiguratorFor(s v1beta1.SearchStrategy) (useAIConfigurator *bool, representable bool) {
	switch s {
	case "":
		return nil, true
	case v1beta1.SearchStrategyRapid:
		return ptr.To(true), true
	case v1beta1.SearchStrategyThorough:
		return ptr.To(false), true
	default:
		return nil, false
	}
}

type annotated interface {
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}

func dropDGDRConversionData(meta annotated) {
	annotations := meta.GetAnnotations()
	if _, ok := annotations[DGDRConversionAnnotation]; !ok {
		return
	}
	delete(annotations, DGDRConversionAnnotation)
	if len(annotations) == 0 {
		meta.SetAnnotations(nil)
	}
}

// takeDGDRConversionData removes DGDRConversionAnnotation from meta and returns its payload.
func takeDGDRConversionData(meta annotated) (dgdrConversionData, error) {
	var data dgdrConversionData
	raw, ok := meta.GetAnnotations()[DGDRConversionAnnotation]
	if !ok {
		return data, nil
	}
	dropDGDRConversionData(meta)
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		return data, fmt.Errorf("reading annotation %s: %w", DGDRConversionAnnotation, err)
	}
	return data, nil
}

func putDGDRConversionData(meta annotated, data dgdrConversionData) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("writing annotation %s: %w", DGDRConversionAnnotation, err)
	}
	annotations := meta.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DGDRConversionAnnotation] = string(raw)
	meta.SetAnnotations(annotations)
	return nil
}
