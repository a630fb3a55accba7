/**
 * The sidebar's icon: three bars of a timeline, drawn in the theme's icon colour.
 */
import { LabIcon } from '@jupyterlab/ui-components';

const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="2" y="3.5" width="20" height="4" rx="1"/>
    <rect x="2" y="10" width="13" height="4" rx="1"/>
    <rect x="6" y="16.5" width="7" height="4" rx="1"/>
  </g>
</svg>`;

export const torchprofIcon = new LabIcon({ name: 'jupyter-torchprof:runs', svgstr });
