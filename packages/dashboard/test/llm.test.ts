/** The side panel's reading of a proxied LLM call: summary, messages, answer; other payloads give nothing. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { llmView, recordedBody } from '../src/llm.js';

test('an OpenAI chat call: model, tokens, messages and the answer', () => {
  const v = llmView({
    llm: {
      provider: 'openai',
      api: 'chat.completions',
      model: 'gpt-4o-mini',
      streamed: false,
      usage: { inputTokens: 12, outputTokens: 3 },
      finishReason: 'stop',
    },
    request: {
      method: 'POST',
      body: {
        model: 'gpt-4o',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        ],
      },
    },
    response: { status: 200, body: { choices: [{ message: { role: 'assistant', content: 'hello' } }] } },
  });
  assert.ok(v);
  assert.equal(v.model, 'gpt-4o-mini', "the summary's model (the answer's) wins");
  assert.deepEqual(v.usage, { inputTokens: 12, outputTokens: 3 });
  assert.deepEqual(v.messages, [
    { role: 'system', text: 'be brief' },
    { role: 'user', text: 'hi' },
  ]);
  assert.equal(v.answer, 'hello');
});

test('an Anthropic call recorded as bodyText; a payload that is no LLM call gives undefined', () => {
  const v = llmView({
    request: { bodyText: JSON.stringify({ model: 'claude', system: 'sys', messages: [{ role: 'user', content: 'q' }] }) },
    response: { body: { content: [{ type: 'text', text: 'a' }] } },
  });
  assert.equal(v?.model, 'claude');
  assert.deepEqual(
    v?.messages.map((m) => m.role),
    ['system', 'user'],
  );
  assert.equal(v?.answer, 'a');
  assert.equal(llmView({ thought: 'plan' }), undefined);
  assert.equal(recordedBody({ bodyText: 'not json' }), 'not json');
});
