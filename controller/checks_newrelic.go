package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// defaultNewRelicAddress is NerdGraph's US endpoint; the EU one is
// https://api.eu.newrelic.com/graphql.
const defaultNewRelicAddress = "https://api.newrelic.com/graphql"

// nrqlQuery asks NerdGraph for an NRQL query's result rows, as Argo
// Rollouts' New Relic provider does; the account and the query are
// variables, never spliced into the GraphQL text.
const nrqlQuery = `query($accountId: Int!, $nrql: Nrql!) { actor { account(id: $accountId) { nrql(query: $nrql) { results } } } }`

// newRelicAnswer is the part of NerdGraph's answer a check reads.
type newRelicAnswer struct {
	Data struct {
		Actor struct {
			Account struct {
				NRQL *struct {
					Results []json.RawMessage `json:"results"`
				} `json:"nrql"`
			} `json:"account"`
		} `json:"actor"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// newRelic runs an NRQL query in the check's account; the value is the
// first result row's field that jsonPath selects, or its only field.
func (c *Checker) newRelic(ctx context.Context, w *scribev1.Workload, p probe) (measurement, error) {
	ch := p.check
	if ch.Query == "" || ch.SecretRef == nil {
		return measurement{}, errors.New("a newrelic check needs query, accountID and secretRef")
	}
	address := ch.Address
	if address == "" {
		address = defaultNewRelicAddress
	}
	if err := ValidatePrometheusAddress(address); err != nil {
		return measurement{}, fmt.Errorf("address %w", err)
	}
	e, err := c.endpoint(ctx, w, p, address)
	if err != nil {
		return measurement{}, err
	}
	// An Argo Rollouts template's account is the Secret's account-id.
	accountID := ch.AccountID
	if accountID == "" {
		accountID = strings.TrimSpace(string(e.secret["account-id"]))
	}
	account, err := strconv.ParseInt(accountID, 10, 64)
	if err != nil {
		return measurement{}, fmt.Errorf("%s: the New Relic account %q is not a number (accountID, or the Secret's account-id)", p.field, accountID)
	}
	key := strings.TrimSpace(string(e.secret["personal-api-key"]))
	if key == "" {
		return measurement{}, fmt.Errorf("%s.secretRef: secret %s needs the key personal-api-key", p.field, ch.SecretRef.Name)
	}
	payload, err := json.Marshal(map[string]any{"query": nrqlQuery, "variables": map[string]any{"accountId": account, "nrql": ch.Query}})
	if err != nil {
		return measurement{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, address, bytes.NewReader(payload))
	if err != nil {
		return measurement{}, fmt.Errorf("address: %s", remoteText(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("API-Key", key)
	body, err := e.do(ctx, req)
	if err != nil {
		return measurement{}, fmt.Errorf("query %s: %w", address, err)
	}
	var ans newRelicAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return measurement{}, fmt.Errorf("query %s: the answer is not NerdGraph's: %s", address, remoteText(err.Error()))
	}
	if len(ans.Errors) > 0 {
		return measurement{}, fmt.Errorf("query %s: %s", address, remoteText(ans.Errors[0].Message))
	}
	nrql := ans.Data.Actor.Account.NRQL
	if nrql == nil || len(nrql.Results) == 0 {
		return measurement{asked: ch.Query}, nil
	}
	var row map[string]any
	if err := json.Unmarshal(nrql.Results[0], &row); err != nil {
		return measurement{}, fmt.Errorf("query %s: the first row is not an object: %s", address, remoteText(err.Error()))
	}
	row, _ = plain(row).(map[string]any)
	return measurement{asked: ch.Query, found: true, raw: row, number: func() (float64, bool, error) {
		if ch.JSONPath != "" {
			v, ok, err := selectIn(row, ch.JSONPath)
			if err != nil || !ok {
				return 0, ok, err
			}
			return number(v, ch.JSONPath)
		}
		if len(row) != 1 {
			return 0, false, fmt.Errorf("query %s: the first row has %d fields; jsonPath names the one to check", address, len(row))
		}
		for k, v := range row {
			return number(v, "{."+k+"}")
		}
		return 0, false, nil
	}}, nil
}
