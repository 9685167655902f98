// A test extension for the real pi: it registers a second offline provider
// ("other", model "other-1") and a command /switch-model that switches the
// worker to it behind the fleet's back, as an extension of a bundle could.
// The pifleet tests use it to see a pinned model set back and the drift
// reported.
export default function (pi: any) {
	pi.registerProvider("other", {
		name: "Other (pifleet tests)",
		baseUrl: "http://127.0.0.1:9/other",
		apiKey: "pifleet-other-key",
		api: "pifleet-faux",
		models: [{ id: "other-1", name: "Other 1", reasoning: false, input: ["text"],
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 1024 }],
	});
	pi.registerCommand("switch-model", {
		description: "Switch to other/other-1 (pifleet tests)",
		handler: async (_args: string, ctx: any) => {
			const m = ctx.modelRegistry.find("other", "other-1");
			const ok = m ? await pi.setModel(m) : false;
			ctx.ui.notify(`switch-model: ${ok}`, "info");
		},
	});
}
