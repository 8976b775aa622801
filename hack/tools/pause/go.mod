// Module pause builds the pod sandbox ("pause") program baked into offline kind node images.
module github.com/gauntlet-dev/gauntlet/hack/tools/pause

go 1.26.0
