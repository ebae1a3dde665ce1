// skillgrove studio's build: plain JSX through esbuild (no React plugin needed), relative asset
// paths so the page works under /studio/ of any server, one JS and one CSS file in dist/.
import { defineConfig } from "vite";

export default defineConfig({
  base: "./",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
    rollupOptions: { output: { entryFileNames: "assets/studio.js", assetFileNames: "assets/studio[extname]" } },
  },
});
