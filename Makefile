# Thin wrappers; the scripts in ci/ are what CI and the README run.
.PHONY: build test demo generate vet clean

build:
	go build -o bin/birdcage ./cmd/birdcage
	go build -o bin/birdcage-programmer ./cmd/birdcage-programmer

test:
	ci/test

demo:
	ci/demo

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	go vet ./...

# Regenerate the committed bpf2go objects (clang, llvm, libbpf-dev).
generate:
	go generate ./bpf/...

clean:
	bin/birdcage clean || go run ./cmd/birdcage clean
