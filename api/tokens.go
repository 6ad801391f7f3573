package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/auth"
)

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role" enum:"viewer,operator,admin"`
	CreatedAt time.Time `json:"created_at"`
}

type createTokenInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"64" pattern:"^[A-Za-z0-9._-]+$" doc:"Who or what holds the token." example:"ci-bot"`
		Role string `json:"role" enum:"viewer,operator,admin" doc:"viewer reads; operator submits, cancels, uploads; admin changes policies, clusters and tokens."`
	}
}

type createTokenOutput struct {
	Body struct {
		TokenInfo
		Token string `json:"token" doc:"The secret. Shown once; only its hash is stored."`
	}
}

type listTokensOutput struct {
	Body struct {
		Tokens []TokenInfo `json:"tokens"`
	}
}

type tokenIDInput struct {
	ID string `path:"id" maxLength:"64"`
}

func (s *Server) registerTokens() {
	create := op(http.MethodPost, "/v1/tokens", "create-token", "Create an API token", auth.Admin, "tokens")
	create.DefaultStatus = http.StatusCreated
	huma.Register(s.API, create, func(ctx context.Context, in *createTokenInput) (*createTokenOutput, error) {
		role, err := auth.ParseRole(in.Body.Role)
		if err != nil {
			return nil, huma.Error422UnprocessableEntity("invalid role", &huma.ErrorDetail{Location: "body.role", Message: err.Error(), Value: in.Body.Role})
		}
		secret, tok, err := s.d.Tokens.Create(in.Body.Name, role)
		if err != nil {
			return nil, huma.Error500InternalServerError("create token", err)
		}
		out := &createTokenOutput{}
		out.Body.TokenInfo = tokenInfo(tok)
		out.Body.Token = secret
		return out, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/tokens", "list-tokens", "List API tokens (never their secrets)", auth.Admin, "tokens"),
		func(ctx context.Context, _ *struct{}) (*listTokensOutput, error) {
			out := &listTokensOutput{}
			out.Body.Tokens = []TokenInfo{}
			for _, t := range s.d.Tokens.List() {
				out.Body.Tokens = append(out.Body.Tokens, tokenInfo(t))
			}
			return out, nil
		})

	del := op(http.MethodDelete, "/v1/tokens/{id}", "revoke-token", "Revoke an API token", auth.Admin, "tokens")
	del.DefaultStatus = http.StatusNoContent
	huma.Register(s.API, del, func(ctx context.Context, in *tokenIDInput) (*struct{}, error) {
		if err := s.d.Tokens.Revoke(in.ID); err != nil {
			if errors.Is(err, auth.ErrUnknownToken) {
				return nil, huma.Error404NotFound("token " + in.ID + " not found")
			}
			return nil, huma.Error500InternalServerError("revoke token", err)
		}
		return nil, nil
	})
}

func tokenInfo(t auth.Token) TokenInfo {
	return TokenInfo{ID: t.ID, Name: t.Name, Role: string(t.Role), CreatedAt: t.CreatedAt}
}
