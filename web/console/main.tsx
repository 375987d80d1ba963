/** The console's entry point (bundled by src/console/build.ts into web/dist/). */
import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { App } from './app';

render(<App />, document.getElementById('app')!);
