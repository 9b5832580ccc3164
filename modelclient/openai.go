package modelclient

import (
	"encoding/json"
	"strings"
)

// The openai dialect: a chat-completions request whose user message is the
// relay request as text, asking for JSON-schema output.

const screenInstructions = `You screen what listeners submit to a community music site before it is shown to anyone.
The user message is a JSON request: "kind" is revision (a song: "subject.title" and its code in "subject.text"), comment or pitch (the text in "subject.text").
Block spam, scams, harassment, hate, sexual content involving minors, other illegal content, and code meant to harm listeners; allow everything else, including rough, odd or unfinished work.
Answer with JSON only: {"verdict":"allow" or "block","confidence":how sure you are of that verdict, from 0 to 1}.`

const scoreInstructions = `You are an art critic for songs written as code.
The user message is a JSON request: "song" holds the title and the code, "rubric" names the rubric and "spec" is its text.
Judge the song by that rubric alone.
Answer with JSON only: {"art":the overall art from 0 to 1,"criteria":[{"name":a criterion of the rubric,"score":from 0 to 1}, ...]}.`

// A verdict is a classification: the most likely label is wanted. The three
// score runs exist to average independent judgements, so they are sampled.
const (
	screenTemperature = 0.0
	scoreTemperature  = 0.7
)

// Strict structured output (OpenAI) requires every object to list all its
// properties and forbid others, so a map of criteria cannot be described:
// the schema asks for a list of {name, score} instead, and the decoder
// accepts both that and the relay's map.
var (
	verdictSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"verdict":{"type":"string","enum":["allow","block"]},` +
		`"confidence":{"type":"number","minimum":0,"maximum":1}},` +
		`"required":["verdict","confidence"],"additionalProperties":false}`)
	artSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"art":{"type":"number","minimum":0,"maximum":1},` +
		`"criteria":{"type":"array","items":{"type":"object","properties":{` +
		`"name":{"type":"string"},"score":{"type":"number","minimum":0,"maximum":1}},` +
		`"required":["name","score"],"additionalProperties":false}}},` +
		`"required":["art","criteria"],"additionalProperties":false}`)
)

type (
	chatBody struct {
		Model          string        `json:"model,omitempty"` // llama.cpp needs none; OpenAI and Ollama do
		Messages       []chatMessage `json:"messages"`
		ResponseFormat chatFormat    `json:"response_format"`
		Temperature    float64       `json:"temperature"`
		Stream         bool          `json:"stream"`
	}
	chatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	chatFormat struct {
		Type       string     `json:"type"`
		JSONSchema chatSchema `json:"json_schema"`
	}
	chatSchema struct {
		Name   string          `json:"name"`
		Strict bool            `json:"strict"`
		Schema json.RawMessage `json:"schema"`
	}
)

func chatRequest(model, instructions string, relay []byte, name string, schema json.RawMessage, temperature float64) []byte {
	return encode(chatBody{
		Model: model,
		Messages: []chatMessage{
			{Role: "system", Content: instructions},
			{Role: "user", Content: string(relay)},
		},
		ResponseFormat: chatFormat{
			Type:       "json_schema",
			JSONSchema: chatSchema{Name: name, Strict: true, Schema: schema},
		},
		Temperature: temperature,
	})
}

// chatContent returns the JSON a chat completion carries in
// choices[0].message.content, unwrapped from what models put around it.
func chatContent(raw []byte) ([]byte, bool) {
	var completion struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(raw, &completion) != nil || len(completion.Choices) == 0 {
		return nil, false
	}
	content := completion.Choices[0].Message.Content
	if content == nil { // a refusal, or a tool call
		return nil, false
	}
	return []byte(unwrapContent(*content)), true
}

// unwrapContent strips a leading <think>…</think> block (reasoning models
// served by Ollama or llama.cpp emit one) and a Markdown code fence (models
// that ignore response_format often fence their JSON).
func unwrapContent(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "<think>"); ok {
		if _, after, found := strings.Cut(rest, "</think>"); found {
			s = strings.TrimSpace(after)
		}
	}
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if len(rest) >= 4 && strings.EqualFold(rest[:4], "json") {
			rest = rest[4:]
		}
		rest = strings.TrimSpace(rest)
		s = strings.TrimSpace(strings.TrimSuffix(rest, "```"))
	}
	return s
}
