# Fault and abuse suite (internal/chaos): kill -9 of the S3 server, the
# control plane (`trainyard dev`) and an agent in the middle of a CartPole
# run, counting what was lost (must be 0) and the recovery time; every API
# route fuzzed from the served OpenAPI document; 200 concurrent submissions
# and status polls with p50/p99. They are ordinary Go tests, so `make test`
# (CI) runs them too (~5 min on 2 cores); this target runs only them and
# shows their reports. Full log: .cache/chaos.log.
.PHONY: chaos

chaos:
	@mkdir -p $(CACHE)
	@echo "go test -count=1 -v ./internal/chaos/  (log: $(CACHE)/chaos.log)"
	@$(GO) test -count=1 -v -timeout 30m ./internal/chaos/ > $(CACHE)/chaos.log 2>&1; rc=$$?; \
	  grep -aE '^(chaos\| |--- |ok |FAIL)' $(CACHE)/chaos.log | sed 's/^chaos| //'; \
	  if [ $$rc -ne 0 ]; then echo "--- failures:"; grep -aE '_test\.go:[0-9]+: ' $(CACHE)/chaos.log | tail -40; fi; \
	  exit $$rc

# Native fuzzing of the API's routing (any method and path: no panic, no
# 500, every error a problem document), 30 s.
.PHONY: chaos-fuzz
chaos-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRouting$$' -fuzztime 30s ./api/
